-- Argo CD health of a hookkeeper.dev DeliveryRecovery, an operation
-- (docs/gitops.md): Waiting or Running is Progressing, Failed is Degraded,
-- Complete is Healthy unless some items need a reissue (Degraded: create
-- a recovery with action Auto or Reissue).
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
  hs.message = "waiting for the controller to observe the recovery"
  return hs
end
local failed = condition("Failed")
if obj.status.state == "Failed" or (failed ~= nil and failed.status == "True") then
  hs.status = "Degraded"
  hs.message = failed ~= nil and failed.message or "failed"
  return hs
end
local complete = condition("Complete")
if obj.status.state == "Complete" and complete ~= nil and complete.status == "True" then
  local reissue = condition("ReissueRequired")
  if reissue ~= nil and reissue.status == "True" then
    hs.status = "Degraded"
    hs.message = reissue.message
    return hs
  end
  hs.status = "Healthy"
  hs.message = complete.message
  return hs
end
hs.status = "Progressing"
hs.message = complete ~= nil and complete.message or "not started"
return hs
