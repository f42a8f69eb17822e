package bashexec

// Bash is the absolute path of the bash the executor runs ("" when none was found).
func (e *Executor) Bash() string { return e.bash }
