"""Logic every lockstep frontend shares: life cycle, reduce ops, naming, handles,
argument checks, submission to the core, and object collectives."""
