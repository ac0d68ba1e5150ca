"""The MCP surface: server, tools, resources, prompts, notifications, HTTP transports."""
