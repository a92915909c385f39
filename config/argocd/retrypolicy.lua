-- Argo CD health of a hookkeeper.dev RetryPolicy (docs/gitops.md): not yet
-- observed is Progressing, Stalled (an invalid spec) is Degraded, Ready is
-- Healthy.
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
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
hs.status = "Progressing"
hs.message = ready ~= nil and ready.message or "not reconciled yet"
return hs
