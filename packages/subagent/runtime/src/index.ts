export type {
  SubagentBudget,
  SubagentBudgetExceeded,
  SubagentBudgetKind,
  SubagentBudgetSpent,
  SubagentPricedStep,
  SubagentStepPricer,
} from './budget.js'
export { budgetOf, SUBAGENT_BUDGET_KEYS, SUBAGENT_BUDGET_KIND_OF } from './budget.js'
export { SubagentCatalog } from './catalog.js'
export type { SubagentCatalogOptions } from './catalog-options.js'
export { DEFAULT_COLD_READ_CONCURRENCY, MAX_COLD_READ_CONCURRENCY } from './catalog-options.js'
export type {
  SubagentContinuableDescriptor,
  SubagentDescriptor,
  SubagentMode,
  SubagentOneShotDescriptor,
  SubagentToolFilter,
} from './descriptor.js'
export { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION } from './descriptor.js'
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
export {
  INPUT_TEXT_MAX_CHARS,
  REPORT_TEXT_MAX_CHARS,
  RUN_ERROR_MAX_CHARS,
  SETTINGS_MAX_DEPTH,
  SETTINGS_MAX_VALUES,
  SPAWN_INSTRUCTIONS_MAX_CHARS,
  SPAWN_LABEL_MAX_CHARS,
  SPAWN_NAME_MAX_CHARS,
  SPAWN_PERSONA_MAX_CHARS,
} from './limits.js'
export { explainChildren, explainDescendants, listChildren, listDescendants } from './list-children.js'
export type { ExplainedSubagentEntry, SubagentCatalogServices, SubagentListEntry, SubagentListRung } from './list-types.js'
export type { SubagentUsage } from './list-usage.js'
export { latestClosedCut } from './log-scan.js'
export type { SubagentOptions, SubagentSettings } from './options.js'
export { mergeSettings, SUBAGENT_OPTIONS_EVENT, SUBAGENT_OPTIONS_VERSION } from './options.js'
export { subagentsPlugin } from './plugin.js'
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
  SubagentOptionsRecord,
  SubagentProfileProjection,
  SubagentProfileState,
  SubagentTimingProjection,
  SubagentTimingState,
} from './projection-types.js'
export type { SubagentRuntimeOptions, SubagentToolProvider } from './runtime.js'
export { SubagentRuntime } from './runtime.js'
export type {
  CallerOptions,
  CloseResult,
  InterruptOptions,
  ResumeOptions,
  SendResult,
  SpawnOptions,
  SubagentHandle,
  SubagentServiceSource,
  SubagentSettlement,
  WaitEntry,
  WaitOptions,
} from './runtime-types.js'
export { DEFAULT_MAX_DEPTH, DEFAULT_WAIT_MS, MAX_WAIT_MS } from './runtime-types.js'
export type { Script, ScriptedCallResult, ScriptedDriverOptions, ScriptStep } from './scripted-driver.js'
export { createScriptedDriver } from './scripted-driver.js'
export type { TreeSnapshotEntry, TreeSnapshotOptions, TreeSnapshotStatus } from './tree-snapshots.js'
export { treeSnapshots } from './tree-snapshots.js'
