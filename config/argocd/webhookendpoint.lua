-- Argo CD health of a hookkeeper.dev WebhookEndpoint (docs/gitops.md).
-- The same rules as kstatus where they overlap: not yet observed or not
-- Ready is Progressing, Stalled is Degraded; beyond kstatus, a paused
-- endpoint is Suspended (spec.paused overrides the circuit breaker), and an
-- open circuit breaker, exhausted deliveries or a failing receiver are
-- Degraded, with the condition's message.
local hs = {}
local function condition(t)
  if obj.status ~= nil and obj.status.conditions ~= nil then
    for _, c in ipairs(obj.status.conditions) do
      if c.type == t then return c end
    end
  end
  return nil
end
if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "waiting for the controller to observe the latest spec"
  return hs
end
local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message
  return hs
end
local ready = condition("Ready")
if ready == nil or ready.status ~= "True" then
  hs.status = "Progressing"
  hs.message = ready ~= nil and ready.message or "not reconciled yet"
  return hs
end
if obj.spec.paused then
  hs.status = "Suspended"
  hs.message = "paused: deliveries wait"
  return hs
end
local circuit = condition("CircuitOpen")
if circuit ~= nil and circuit.status == "True" then
  hs.status = "Degraded"
  hs.message = circuit.message
  return hs
end
local exhausted = condition("DeliveriesExhausted")
if exhausted ~= nil and exhausted.status == "True" then
  hs.status = "Degraded"
  hs.message = exhausted.message
  return hs
end
local healthy = condition("Healthy")
if healthy ~= nil and healthy.status == "False" then
  hs.status = "Degraded"
  hs.message = healthy.message
  return hs
end
hs.status = "Healthy"
hs.message = ready.message
return hs
