"""The public facades, written once over the runtime and executor seams."""
