"""Identity: contacts, entities, and what a merge of two people does to their sessions."""
