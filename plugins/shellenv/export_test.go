package shellenv

// NewSnapshot builds a snapshot from vars, for the black-box tests of its accessors.
var NewSnapshot = newSnapshot
