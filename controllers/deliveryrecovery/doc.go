// Package deliveryrecovery reconciles DeliveryRecoveries: it asks the
// delivery engine to retry an endpoint's exhausted deliveries or replay its
// events, follows the work and writes the recovery's status.
package deliveryrecovery
