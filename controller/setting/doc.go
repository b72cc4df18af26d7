// Package setting holds the setting controller: it checks each Setting
// against its definition, marks a valid one applied and an invalid one
// not applied (the default is used instead), with a Warning event naming
// the rule. Components read the values through the datastore.
package setting
