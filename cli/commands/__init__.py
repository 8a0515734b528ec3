"""One module per ``orml`` command: ``register(sub)`` adds its parser, ``run(args)`` runs it."""
