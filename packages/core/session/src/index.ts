export type {
  AttachmentRef,
  ContentBlock,
  ContentBlockMap,
  ContentBlockType,
  FileBlock,
  ImageBlock,
  ReasoningBlock,
  StepFinish,
  TextBlock,
  TokenUsage,
  ToolCallBlock,
  ToolResultBlock,
} from './blocks.js'
export { ATTACHMENT_INLINE_MAX_BYTES, CORE_BLOCK_TYPES, STEP_FINISHES } from './blocks.js'
export { SessionId, SessionLogOffset, SessionSeq, SessionSeqCursor } from './brands.js'
export type { SessionErrorCode } from './errors.js'
export { SessionError } from './errors.js'
export type {
  CompactionOwner,
  HarnessTokenUsage,
  SessionEvent,
  SessionEventMap,
  SessionEventType,
  StoredSessionEvent,
  TurnEndReason,
} from './events.js'
export type { SessionHeader } from './header.js'
export { parseSessionHeader, SESSION_HEADER_VERSION, SESSION_HEADER_WITNESS_FIELDS, sameLifecycle } from './header.js'
export type { JsonValue } from './json.js'
export { freezeLosslessJson } from './json.js'
export { compareSessionIds } from './order.js'
export type { SessionInit } from './session.js'
export { findOpenTurn, Session } from './session.js'
export type { CreateSessionOptions, ForkOptions, RestoredSession, SessionCreatedInfo, SessionStoreOptions } from './store.js'
export { forkSeed, SessionStore, sessionStorePlugin } from './store.js'
