return { model = { layers = "two" } }
