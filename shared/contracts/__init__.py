"""The wire contracts the services share: what one service answers and the others may read."""
