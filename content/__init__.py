"""What flows through the gateway besides text: content parts and the blob store they point into.

A neutral package: `adapters`, `agent`, `tools` and `bot` may all import it; it imports none of
them.
"""
