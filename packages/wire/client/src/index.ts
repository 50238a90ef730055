export { createClient } from './client.js'
export type { ClientOptions, DshClient, EventSearchPage, HistoryRequest, ListSessionsFilter, RequestOptions, SearchRequest, SessionSearchPage } from './client.js'
export { ClientError, isClientError } from './errors.js'
export type { ClientLocalErrorCode } from './errors.js'
export type {
  HistoryPageBody,
  SearchPageBody,
  SessionListPageBody,
  StreamEventBody,
  SubagentListBody,
  SubagentListRowBody,
  SubagentScope,
  WireSessionHeader,
  WireSessionRecord,
  WireStoredEvent,
} from '@dsh/apiproxy/schemas'
