"""How each registered format is read: one small module per kind of body (see `registry`)."""
