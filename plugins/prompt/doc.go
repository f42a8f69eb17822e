// Package prompt provides the `systemPrompt` service: ordered prompt sections that
// plugins contribute and the composed system prompt.
//
// Sections are {name, order, text}, owned by the activation that added them. The
// composed prompt is the sections sorted by order (then name), joined by a blank line.
package prompt
