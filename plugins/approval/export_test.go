package approval

// Message exposes the question put to the user, for the black-box tests.
var Message = question
