export { SessionQueryError } from './errors.js'
export type { SessionQueryErrorCode } from './errors.js'
export type {
  EventSearchHit,
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
} from './types.js'
