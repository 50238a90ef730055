export { SubagentError } from './errors.js'
export type { SubagentErrorCode } from './errors.js'
export { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION, subagentDescriptorSchema } from './descriptor.js'
export type { SubagentContinuableDescriptor, SubagentDescriptor, SubagentMode, SubagentOneShotDescriptor, SubagentSettings } from './descriptor.js'
export type { SubagentIdentityProjection, SubagentIdentityState, SubagentTimingProjection, SubagentTimingState } from './projection-types.js'
export {
  registerSubagentUnits,
  SUBAGENT_IDENTITY_KEY,
  SUBAGENT_IDENTITY_STATE_VERSION,
  SUBAGENT_TIMING_KEY,
  SUBAGENT_TIMING_STATE_VERSION,
  subagentIdentityUnit,
  subagentTimingUnit,
} from './projection.js'
export type { SubagentDriver, SubagentRun, SubagentRunOutcome } from './driver.js'
export { createScriptedDriver } from './scripted-driver.js'
export type { Script, ScriptedDriverOptions, ScriptStep } from './scripted-driver.js'
export { COLD_READ_CONCURRENCY, explainChildren, explainDescendants, listChildren, listDescendants } from './list-children.js'
export type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry, SubagentListRung } from './list-types.js'
export { DEFAULT_MAX_DEPTH, latestClosedCut, SubagentRuntime, subagentsPlugin } from './runtime.js'
export type { ResumeOptions, SpawnOptions, SubagentHandle, SubagentRuntimeOptions, SubagentServiceSource } from './runtime.js'
