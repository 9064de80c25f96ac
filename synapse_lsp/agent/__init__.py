"""The agent: one chat session's turns over a model, its history, sub-agents and store.

Nothing here imports a face (pygls, the terminal); the model SDK loads on the first call.
"""
