"""The warehouse's own error type, in a module of its own so that the modules
``warehouse.catalog`` builds on (``warehouse.concurrency``) can raise it too."""


class WarehouseError(RuntimeError):
    """A warehouse operation failed for a reason the user can act on."""
