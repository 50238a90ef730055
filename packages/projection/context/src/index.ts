export type { SessionContextErrorCode } from './errors.js'
export { SessionContextError } from './errors.js'
export { sessionContextStateSchema } from './schema.js'
export type {
  ContextBlock,
  ContextMessage,
  ContextRole,
  ContextStep,
  ContextSummaryMark,
  ContextWarnings,
  FoldWarning,
  OpenAssistant,
  OpenCompaction,
  SessionContext,
  SessionContextState,
  UnknownBlock,
  ViewWarning,
} from './types.js'
export { FOLD_WARNINGS, SESSION_CONTEXT_KEY, VIEW_WARNINGS } from './types.js'
