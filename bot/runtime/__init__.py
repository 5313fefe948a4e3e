"""The composition root: the `bot` command, config, the app that builds and runs its parts."""
