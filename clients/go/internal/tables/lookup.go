package tables

// ParameterNamed returns the parameter whose ChunkingParams name is name
// ("seq_mode").
func ParameterNamed(name string) (Parameter, bool) {
	for _, p := range Parameters {
		if p.Name == name {
			return p, true
		}
	}
	return Parameter{}, false
}

// AlgorithmNamed returns the algorithm named name ("fastcdc").
func AlgorithmNamed(name string) (Algorithm, bool) {
	for _, a := range Algorithms {
		if a.Name == name {
			return a, true
		}
	}
	return Algorithm{}, false
}
