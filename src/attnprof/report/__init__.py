"""Rendering: terminal tables, Markdown, HTML. Reports render records; they never compute."""
