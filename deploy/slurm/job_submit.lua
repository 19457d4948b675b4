--[[
Allot's job_submit plugin: governed sbatch (docs/slurm.md, "Governed partitions").

A job submitted to a governed partition is held (priority 0) and tagged in its admin
comment, so that Allot's cycle finds it in `squeue --json`, adopts it as an Allot job
and later releases it on the nodes Allot chose. Jobs on any other partition are left
exactly as submitted.

Slurm records priority 0 from a plugin as a user hold (`JobHeldUser`) when a user
submits, so slurm_job_modify below refuses, for a tagged job, every change of priority
(`scontrol release`, `hold`, `update priority=`), of comment and of partition by anyone
but Allot: the owner cannot run it outside Allot. Nobody but Allot may move a job of
another partition into a governed one (it would run there unheld). Only jobs that Allot
submits (submit_uid in ALLOT_UIDS) may skip the hold with their `allot-attempt:` comment; another submitter's
`allot-` comment is dropped, so it can neither bypass the hold nor pose as Allot's answer.

Enable it in slurm.conf (this file goes next to slurm.conf, named job_submit.lua):

    JobSubmitPlugins=lua

and list the governed partitions below (comma-separated, no spaces), e.g. "gpu,a100",
and the uids Allot's Slurm calls run as (root, and SlurmUser's uid if Allot runs as it).
--]]

local GOVERNED_PARTITIONS = "governed"
local ALLOT_UIDS = "0"
local TAG = "allot-governed"
local ALLOT_PREFIX = "allot-"

local governed = {}
for name in string.gmatch(GOVERNED_PARTITIONS, "[^,]+") do
  governed[name] = true
end

local allot_uids = {}
for uid in string.gmatch(ALLOT_UIDS, "[^,]+") do
  allot_uids[tonumber(uid)] = true
end

local function starts_with(text, prefix)
  return text ~= nil and string.sub(text, 1, string.len(prefix)) == prefix
end

local function is_set(value)
  return value ~= nil and value ~= slurm.NO_VAL
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

-- the partition(s) a job goes to: those it names, else Slurm's default partition (a
-- plain `sbatch job.sh` lands there, so a governed default partition holds it too)
local function submitted_partition(job_desc, part_list)
  if job_desc.partition ~= nil then
    return job_desc.partition
  end
  for name, part in pairs(part_list) do
    if part.flag_default == 1 then
      return name
    end
  end
  return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not is_governed(submitted_partition(job_desc, part_list)) then
    return slurm.SUCCESS
  end
  -- Allot's own starts (sbatch by Allot, comment "allot-attempt:...") are not adopted
  if allot_uids[submit_uid] and starts_with(job_desc.comment, "allot-attempt:") then
    return slurm.SUCCESS
  end
  -- "allot-..." comments are Allot's answers: nobody else may write them
  if starts_with(job_desc.comment, ALLOT_PREFIX) then
    job_desc.comment = ""
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
  if allot_uids[modify_uid] then
    return slurm.SUCCESS
  end
  if not starts_with(job_rec.admin_comment, TAG) then
    -- moved into a governed partition, a job would run there unheld and unseen by Allot
    if is_governed(job_desc.partition) then
      slurm.log_info("allot: uid %d may not move job %d into governed partition %s",
        modify_uid, job_rec.job_id, job_desc.partition)
      slurm.log_user("allot: a job enters a governed partition only by sbatch -p %s",
        job_desc.partition)
      return slurm.ESLURM_ACCESS_DENIED
    end
    return slurm.SUCCESS
  end
  -- a held, tagged job is released (and its comment written) by Allot alone, and stays
  -- in its governed partition
  if is_set(job_desc.priority) or job_desc.comment ~= nil or job_desc.partition ~= nil then
    slurm.log_info("allot: uid %d may not release, re-comment or move governed job %d",
      modify_uid, job_rec.job_id)
    return slurm.ESLURM_ACCESS_DENIED
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
