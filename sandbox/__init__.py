"""Local stand-ins for Google OAuth, Gmail, Microsoft identity, Graph and Gemini.

They speak the real wire protocols so that the real client libraries can be pointed at them.
See sandbox/README.md for the control API.
"""
