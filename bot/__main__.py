"""`python -m bot` is the `bot` command."""

from bot.cli import main

raise SystemExit(main())
