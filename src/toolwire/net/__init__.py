"""Network checks shared by the parts of toolwire that connect where a caller says (MCP
servers of requests, upstream probes): no toolwire imports, so any layer may use them."""
