/* Every limit on untrusted input, in one table with its default.
 * Change a limit here, nowhere else. */
#ifndef SPACE_LIMITS_H
#define SPACE_LIMITS_H

#define SPACE_ID_MAX            64      /* sandbox, worker, principal ids: [A-Za-z0-9_-]{1,64} */
#define SPACE_SUBSTRATE_MAX     15      /* "jail", "firecracker" */
#define SPACE_TOKEN_MAX         4096    /* a capability token, bytes */
#define SPACE_BUNDLE_TOKEN_MAX  65536   /* a signed key bundle, bytes */
#define SPACE_BUNDLE_KEYS_MAX   16      /* keys in one bundle */
#define SPACE_SIGNER_KEYS_MAX   1024    /* signing key files the signer process loads */
#define SPACE_CLAIMS_MAX        3072    /* decoded claims JSON, bytes */
#define SPACE_FOOTER_MAX        512     /* PASETO footer, bytes */
#define SPACE_JTI_MAX           32      /* base64url of 128 bits is 22 */
#define SPACE_CAP_AUDIT_LEN           128     /* detail of a capability.issue audit row */
#define SPACE_KID_MAX           64      /* "k4.pid." + 44 */
#define SPACE_CLOCK_SKEW        15      /* seconds, DESIGN section 4 */
#define SPACE_CAP_LIFETIME      120     /* seconds, exp = iat + 120 */
#define SPACE_VCACHE_ENTRIES    4096    /* verification cache, LRU */

#define SPACE_FRAME_MAX         (1u << 20)  /* one framed message payload */
#define SPACE_FRAME_JSON_MAX    (64u << 10) /* JSON payload of a control frame */
#define SPACE_FRAME_OP_MAX      (4u << 20)  /* REQUEST / RESPONSE: exec stdin and outputs ride in them */
#define SPACE_CHUNK             (256u << 10) /* file data chunk size on the wire */
#define SPACE_BULK_SOCKBUF      (1u << 20)  /* send / receive buffer of a socket carrying a file body */

#define SPACE_HTTP_BODY_MAX     (1u << 20)  /* buffered JSON request bodies */
#define SPACE_ARGS_DEPTH_MAX    32          /* nesting of an operation's args (arrays, objects) */
#define SPACE_JAIL_PTYS_MAX     64          /* terminals one sandbox may open (its devpts' max=) */
#define SPACE_JAIL_INOTIFY_INSTANCES 32     /* inotify instances of one sandbox (its user namespace's) */
#define SPACE_JAIL_INOTIFY_WATCHES 16384    /* inotify watches of one sandbox */
#define SPACE_HTTP_URL_MAX      4096
#define SPACE_AUTH_HEADER_MAX   (SPACE_TOKEN_MAX + 64) /* an Authorization header: "Bearer " + token + spaces */
#define SPACE_HTTP_CONN_MAX     1024        /* concurrent connections per daemon */
#define SPACE_HTTP_CONN_PER_IP  256         /* connections from one address (--http-conns-per-ip) */
#define SPACE_TCP_KEEPALIVE     30          /* seconds of silence before a client's connection is probed (--tcp-keepalive; tcp_keepalive) */
#define SPACE_HTTP_HEAD_TIMEOUT 10          /* seconds to receive a whole request head (--http-head-timeout) */
#define SPACE_HTTP_HEADS_PER_IP 16          /* connections of one address still sending their head; a new one closes the oldest (--http-heads-per-ip) */
#define SPACE_PATH_MAX          4096        /* a path inside a sandbox */
#define SPACE_ARGV_MAX          1024        /* exec arguments */
#define SPACE_ENV_MAX           256         /* exec environment entries */
#define SPACE_EXEC_OUTPUT_MAX   (1u << 20)  /* captured stdout / stderr each, then truncated */
#define SPACE_EXEC_STDIN_MAX    (1u << 20)  /* stdin bytes of one exec (decoded) */
/* an exec request body: stdin at its worst encoding (base64: the CLI picks
 * base64 whenever a JSON string would be longer) plus argv, env and cwd */
#define SPACE_EXEC_BODY_MAX     ((SPACE_EXEC_STDIN_MAX + 2) / 3 * 4 + (256u << 10))
#define SPACE_EXEC_TIMEOUT_MAX  3600        /* seconds */
#define SPACE_STREAM_PAYLOAD_MAX (64u << 10) /* one MSG_STREAM payload (kind + fields + bytes) */
#define SPACE_STREAM_DATA_MAX   (SPACE_STREAM_PAYLOAD_MAX - 1) /* output/input bytes in one MSG_STREAM */
#define SPACE_PTY_DIM_MAX       4096        /* rows or columns of a terminal */
#define SPACE_SIGNO_MAX         64          /* a signal number on the wire (the guest allows fewer) */
#define SPACE_PROC_REPLAY       (64u << 10) /* output kept per stream of a process while no client reads it */
#define SPACE_PROCS_MAX         64          /* processes in a sandbox's table, exited ones included */
#define SPACE_PROC_STDIN_MAX    (64u << 10) /* decoded bytes of one proc.stdin request */
#define SPACE_WATCH_DIRS_MAX    8192        /* directories one recursive watch follows */
#define SPACE_WATCH_QUEUE       1024        /* events queued per watch before OVERFLOW */
#define SPACE_STREAMS_PER_SBX   64          /* concurrent operations per sandbox */
#define SPACE_OPCHAN_IDLE_MAX   2           /* idle operation channels a bridge keeps, each
                                               one a waiting process of the user in the guest */
#define SPACE_OPCHAN_IDLE_MS    1000        /* an idle operation channel is closed after this */
#define SPACE_MGR_SPARE         2           /* node-api's connections to sbx-manager made ahead */
#define SPACE_MGR_SPARE_AGE_S   10          /* a spare older than this is closed unused (sbx-manager
                                               ends a silent connection after 30 s) */
#define SPACE_METADATA_MAX      (16u << 10) /* sandbox metadata JSON, bytes */
#define SPACE_LONGPOLL_MAX      30          /* seconds an assignment long-poll waits */
#define SPACE_ROUTE_WAIT_MS     8000        /* default of space-control --route-wait-ms */
#define SPACE_ARCHIVE_BATCH_MAX 256         /* archives one collection request offers */
#define SPACE_ARCHIVE_MAX       (16ull << 30) /* default of space-control --archive-max: bytes of one uploaded snapshot archive (an archive is never larger than its layer's quota) */
#define SPACE_STORE_MIN_FREE_MB 256         /* MiB an upload to space-control leaves free on its disk (--store-min-free-mb) */
#define SPACE_ROUTE_HOLD_MS     2000        /* default of space-control --route-hold-ms */
#define SPACE_ASSIGNMENTS_MAX   1000        /* assignments in one long-poll answer */
#define SPACE_OP_NAME_MAX       31          /* "exec", "fs.rename", ... in a REQUEST */
#define SPACE_ERROR_CODE_MAX    63          /* "error" and "reason" of an ERROR: [a-z0-9_] */
#define SPACE_ERROR_MESSAGE_MAX 1024        /* "message" of an ERROR, bytes */

#define SPACE_SNAPSHOT_ENTRIES_MAX (1u << 20) /* files, dirs, links in one snapshot archive */
#define SPACE_SNAPSHOT_DEPTH_MAX   128        /* directory nesting in a snapshot */
#define SPACE_SNAPSHOT_DIRBYTES_MAX (64u << 20) /* dir paths kept while restoring (modes, mtimes applied last) */
#define SPACE_SNAPSHOT_SPARSE_MAX  65536      /* data regions of one file kept apart by holes (the smallest holes are stored as zeros beyond) */
#define SPACE_SNAPSHOT_META_MAX    (64ull << 20) /* tar stream beyond twice the layer quota: headers of a full layer */
#define SPACE_SNAPSHOT_INDEX_MAX   (128u << 20) /* a layer's index of unchanged files (incremental archives) */
#define SPACE_FOLLOW_CACHE_MAX     (64u << 20)  /* a download restored along as it arrives enters the worker's cache up to this size; a larger one is released behind the restore (sbx-manager snapblob.c) */
#define SPACE_TEE_CACHE_MAX        (64u << 20)  /* an archive uploaded while it is made (SNAPSHOT_TEE_UNCACHED) stays in the worker's cache up to this size; a larger one only in the upload */
#define SPACE_SNAPSHOT_WINDOW_LOG  23         /* zstd window a restore accepts (8 MiB of decoder memory) */
#define SPACE_SNAPSHOT_ZSTD_LEVEL  1          /* zstd's fastest regular level: a move is bound by the bytes it moves, not their size */
#define SPACE_SNAPSHOT_ZSTD_WORKERS 2         /* compression threads of one archive (beside the one that archives): one per core of a small worker; the output does not depend on the count */
#define SPACE_SNAPSHOT_ZSTD_JOB    (2u << 20) /* bytes of tar stream per compression job (bounds the workers' buffers) */
#define SPACE_ENDPOINT_MAX         512        /* a node-api base URL in the client route cache */
#define SPACE_UNIX_PATH_MAX        108        /* a local socket's path with its NUL (sun_path) */
#define SPACE_ROUTECACHE_ENTRIES   1024       /* sandboxes in the client route cache file */
#define SPACE_NET_LIST_MAX         32         /* entries of an egress allow or deny list (addresses after resolution) */
#define SPACE_NET_NAME_MAX         253        /* a host name in an egress list */
#define SPACE_ROUTECACHE_FILE_MAX  (8u << 20) /* the route cache file, bytes */
#define SPACE_MCP_LINE_MAX         (16u << 20) /* one JSON-RPC message to `space mcp` (a write_file of 8 MiB in base64, and its envelope) */
#define SPACE_MCP_CALLS_MAX        16         /* tools/call requests of one `space mcp` client running at once */
#define SPACE_MCP_FILE_MAX         (8u << 20) /* bytes read_file returns, write_file takes */
#define SPACE_GWHELLO_MAX          4096       /* JSON of one gateway hello or answer frame, bytes (docs/network.md) */
#define SPACE_GWHELLO_TIMEOUT      5          /* seconds a netgtw client has to send its whole hello (slowloris) */
#define SPACE_PORTS_MAX            32         /* declared service ports of one sandbox */
#define SPACE_JAIL_ORPHAN_WAIT     60         /* seconds a jail whose bridge is gone waits for the
                                                 next activation's (docs/jail.md), then ends */

#endif
