"""One job of a study: benchmark x variants x model, answered, measured and tracked."""
