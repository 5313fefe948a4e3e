"""`python -m bot` is the `bot` command."""

from bot.runtime.cli import main

raise SystemExit(main())
