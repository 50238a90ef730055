// The wire types, declared once in @dsh/protocol.
export type {
  CompactionResultBody,
  HistoryPageBody,
  SearchPageBody,
  SessionListPageBody,
  StreamEventBody,
  SubagentListBody,
  SubagentListEntryBody,
  SubagentListRowBody,
  SubagentScope,
  WireSessionHeader,
  WireSessionRecord,
  WireStoredEvent,
} from '@dsh/protocol'
export type {
  ClientOptions,
  CompactRequest,
  DshClient,
  EventSearchPage,
  HistoryRequest,
  ListSessionsFilter,
  RequestOptions,
  SearchRequest,
  SessionSearchPage,
  SubagentsRequest,
} from './client.js'
export { createClient } from './client.js'
export type { ClientLocalErrorCode } from './errors.js'
export { ClientError, isClientError } from './errors.js'
