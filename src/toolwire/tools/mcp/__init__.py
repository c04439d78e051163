"""MCP servers as toolsets: connections (pooled), tools, approvals, readable results."""
