// Package controllers holds one thin reconciler per hookkeeper kind. Each
// reads its object, asks a pure function (or, from the delivery engine on,
// the engine) what the status should be, and writes that status once per
// reconcile through updateStatus. Decisions live in <kind>_status.go files as
// pure functions with table tests.
package controllers
