--[[
Allot's job_submit plugin: governed sbatch (docs/slurm.md, "Governed partitions").

A job submitted to a governed partition is held (priority 0: an administrator's hold,
which its owner cannot release) and tagged in its admin comment, so that Allot's cycle
finds it in `squeue --json`, adopts it as an Allot job and later releases it on the
nodes Allot chose. Jobs on any other partition are left exactly as submitted.

Enable it in slurm.conf (this file goes next to slurm.conf, named job_submit.lua):

    JobSubmitPlugins=lua

and list the governed partitions below (comma-separated, no spaces), e.g. "gpu,a100".
--]]

local GOVERNED_PARTITIONS = "governed"
local TAG = "allot-governed"

local governed = {}
for name in string.gmatch(GOVERNED_PARTITIONS, "[^,]+") do
  governed[name] = true
end

local function is_governed(partition)
  if partition == nil then
    return false
  end
  for name in string.gmatch(partition, "[^,]+") do
    if governed[name] then
      return true
    end
  end
  return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not is_governed(job_desc.partition) then
    return slurm.SUCCESS
  end
  -- Allot's own starts (sbatch from Allot, comment "allot-attempt:...") are not adopted
  local comment = job_desc.comment
  if comment ~= nil and string.sub(comment, 1, 14) == "allot-attempt:" then
    return slurm.SUCCESS
  end
  job_desc.priority = 0
  -- an explicit --requeue makes the Allot job resumable (JobRequeue's default does not)
  if job_desc.requeue == 1 then
    job_desc.admin_comment = TAG .. ",requeue"
  else
    job_desc.admin_comment = TAG
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
