"""`python -m bot` is the `bot` command."""

from bot.runtime.command import main

raise SystemExit(main())
