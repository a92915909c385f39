// Package conditions holds what every controller's status shares: condition
// messages for humans (never a raw Go error, never a secret), the kstatus
// conditions, the one status write per reconcile, and the handling of
// objects whose spec does not decode.
package conditions
