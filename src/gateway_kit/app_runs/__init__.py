"""Runs an app writes itself (`owned_run`), apart from the runs the gateway owns and drives on
goose (`gateway_kit.runs`): their lease, and the sweeper that ends those whose writer stopped."""
