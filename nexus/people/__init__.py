"""People: entities, their contacts and aliases, and what a merge of two people does to
their sessions."""
