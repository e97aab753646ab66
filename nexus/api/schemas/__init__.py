"""Request and response bodies of the resources whose routers would otherwise run long."""
