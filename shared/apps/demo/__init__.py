"""`intraskill demo`: the whole system end to end on this machine, in one command."""
