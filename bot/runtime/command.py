"""The `bot` command's entry point (`bot`, `python -m bot`): the cyclic collector goes off before
the command's modules are imported, since building pydantic's schemas and the channels' SDKs
sets off collections that walk what they built again and again (~10 % of the defaults' start,
more with every channel). `bot serve` turns it back on once it has started (bot/runtime/heap.py:
one collection, the start-up objects frozen); every other command at once (`cli.main`)."""

from __future__ import annotations

import gc


def main() -> int:
    gc.disable()
    from bot.runtime.cli import main as command

    return command()
