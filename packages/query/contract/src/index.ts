// `@dsh/session-query`: what an application uses — the `sessionQuery`
// service and its types, its error class and codes, and the in-memory
// backend with its plugin. What a backend is built from is `./backend` (the
// listing path) and `./backend/reads` (observations, history, search
// requests); the contract suite every backend runs is `./testing`.
export type { SessionQueryErrorCode } from './errors.js'
export { SessionQueryError } from './errors.js'
export type { SessionQueryOptions } from './memory-query.js'
export { createSessionQuery } from './memory-query.js'
export { sessionQueryPlugin } from './plugin.js'
export type { LiveSessions } from './sources.js'
export type {
  EventSearchHit,
  EventWindow,
  EventWindowRequest,
  HistoryPage,
  HistoryPageRequest,
  IndexProgress,
  SearchPage,
  SearchRequest,
  SessionListFilter,
  SessionListPage,
  SessionQuery,
  SessionQueryObservation,
  SessionQueryRecord,
  SessionSearchHit,
  SnippetMark,
} from './types.js'
