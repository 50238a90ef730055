export type {
  SubagentContinuableDescriptor,
  SubagentDescriptor,
  SubagentMode,
  SubagentOneShotDescriptor,
  SubagentSettings,
  SubagentToolFilter,
} from './descriptor.js'
export { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION, subagentDescriptorSchema, subagentToolFilterSchema } from './descriptor.js'
export type { SubagentDriver, SubagentRun, SubagentRunOutcome, SubagentTool } from './driver.js'
export type { SubagentErrorCode } from './errors.js'
export { SubagentError } from './errors.js'
export type {
  SubagentEndData,
  SubagentEndReason,
  SubagentNotice,
  SubagentQueuedData,
  SubagentRunKind,
  SubagentStartData,
} from './lifecycle.js'
export { SUBAGENT_END_EVENT, SUBAGENT_NOTICE_EVENT, SUBAGENT_QUEUED_EVENT, SUBAGENT_START_EVENT } from './lifecycle.js'
export { COLD_READ_CONCURRENCY, explainChildren, explainDescendants, listChildren, listDescendants } from './list-children.js'
export type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry, SubagentListRung } from './list-types.js'
export { checkOutput } from './output.js'
export {
  registerSubagentUnits,
  SUBAGENT_IDENTITY_KEY,
  SUBAGENT_IDENTITY_STATE_VERSION,
  SUBAGENT_PROFILE_KEY,
  SUBAGENT_PROFILE_STATE_VERSION,
  SUBAGENT_TIMING_KEY,
  SUBAGENT_TIMING_STATE_VERSION,
  subagentIdentityUnit,
  subagentProfileUnit,
  subagentTimingUnit,
} from './projection.js'
export type {
  SubagentIdentityProjection,
  SubagentIdentityState,
  SubagentProfileProjection,
  SubagentProfileState,
  SubagentTimingProjection,
  SubagentTimingState,
} from './projection-types.js'
export type {
  CallerOptions,
  CloseResult,
  ResumeOptions,
  SendResult,
  SpawnOptions,
  SubagentHandle,
  SubagentRuntimeOptions,
  SubagentServiceSource,
  SubagentSettlement,
  SubagentToolProvider,
  WaitEntry,
  WaitOptions,
} from './runtime.js'
export { DEFAULT_MAX_DEPTH, DEFAULT_WAIT_MS, latestClosedCut, MAX_WAIT_MS, SubagentRuntime, subagentsPlugin } from './runtime.js'
export type { Script, ScriptedCallResult, ScriptedDriverOptions, ScriptStep } from './scripted-driver.js'
export { createScriptedDriver } from './scripted-driver.js'
