"""The ``orml`` command line (thin: parses arguments, calls the library, prints)."""
