"""The pages' figures (Plotly): answers, attention maps and grids, the paper's diagrams."""
