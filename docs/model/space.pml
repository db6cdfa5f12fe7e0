/*
 * A model of space's routing protocol for one sandbox, checked by spin.
 * docs/model.md says which code each part stands for and which
 * assumptions the model makes.
 *
 *   two control planes (CP) on one store, taking the sandbox's lifecycle
 *     lease by compare-and-swap with a fencing epoch, and able to stall at
 *     any point (a stalled holder's lease may be taken over; a stalled
 *     holder may wake up and try to go on);
 *   two workers, each with a durable runtime record for the sandbox, that
 *     follow their assignments and report installs and retirements;
 *   one client with a route cache, sending requests with the identity of
 *     its cached route and repairing a refused route with one rebuilt
 *     attempt.
 *
 * The sandbox is created (generation 1) and then moved MOVES times; each
 * move retires the current execution, waits for the retirement to be
 * acknowledged, then installs the next generation on a worker chosen
 * nondeterministically (the same one or the other).
 */

#define NW      2            /* workers */
#define NCP     2            /* control-plane replicas */
#define MOVES   2            /* moves after the create */
#define MAXGEN  (1 + MOVES)  /* generations 1..MAXGEN */
#define NREQ    2            /* requests the client makes */
#define STALLS  2            /* control-plane stalls in one run */
#define NONE    255

/* ---- the control plane's store: every write is one transaction ---- */
byte cur_gen = 1;              /* the sandbox's current generation */
byte cur_worker = 0;           /* and its worker */
bool running = false;          /* sandbox state == running */
byte op_step = 2;              /* the lifecycle operation in progress:
                                  0 none, 1 retiring the old execution,
                                  2 waiting for the new one to serve */
byte moves_left = MOVES;
byte lease_owner = NONE;       /* the CP holding the lifecycle lease */
byte lease_epoch = 0;          /* bumped at each acquisition: the fence */
bool hold = false;             /* a route handed to a repair is held */

/* assignments: per generation, the worker and the desired state
   (1 serve, 2 retire), and what the workers reported */
byte exec_worker[MAXGEN + 1];
byte desired[MAXGEN + 1];
bool rep_serving[MAXGEN + 1];
bool rep_retired[MAXGEN + 1];  /* the retirement was acknowledged */

/* ---- each worker's durable runtime record for the sandbox ---- */
byte rec_gen[NW];              /* 0: no record */
byte rec_state[NW];            /* 0 none, 1 serving, 2 retired */

bool stalled[NCP];
byte stalls_left = STALLS;

/* ---- client <-> worker messages ---- */
mtype = { ALLOW, REFRESH };
chan req[NW] = [1] of { byte };       /* the capability's generation */
chan rsp[NW] = [1] of { mtype, byte };/* outcome, serving generation */

byte served_reqs = 0;
bool client_done = false;
bool second_refusal_while_running = false;

/* the safety properties (checked in every reachable state) */
#define nserving ((rec_state[0] == 1) + (rec_state[1] == 1))
active proctype invariants()
{
end:	atomic {
		(nserving > 1 || second_refusal_while_running) ->
		assert(nserving <= 1 && !second_refusal_while_running)
	}
}

/* an assignment to install on worker w (MAXGEN is 3) */
#define NEW1(w, k) (exec_worker[k] == w && desired[k] == 1 && rec_gen[w] < k)
#define NEWER(w) (NEW1(w, 1) || NEW1(w, 2) || NEW1(w, 3))

proctype worker(byte w)
{
	byte g, k;
end:	do
	/* install an assignment newer than the record (records.c: an install
	   is committed before it is reported) */
	:: atomic {
		NEWER(w) ->
		k = 1;
		do
		:: k <= MAXGEN ->
			if
			:: exec_worker[k] == w && desired[k] == 1 && rec_gen[w] < k ->
				rec_gen[w] = k; rec_state[w] = 1; break
			:: else -> k++
			fi
		:: else -> break
		od
	   }
	   if
	   :: k <= MAXGEN -> rep_serving[k] = true   /* the report, later */
	   :: else -> skip
	   fi
	/* retire: committed, then acknowledged */
	:: atomic {
		rec_gen[w] > 0 && rec_state[w] == 1 && desired[rec_gen[w]] == 2 ->
		rec_state[w] = 2; g = rec_gen[w]
	   }
	   rep_retired[g] = true
	/* a request: the comparator against the durable record */
	:: req[w] ? g ->
		atomic {
			if
			:: rec_gen[w] == g && rec_state[w] == 1 ->
				/* property 2: never served after its retirement
				   was acknowledged */
				assert(!rep_retired[g]);
				rsp[w] ! ALLOW, g
			:: else ->
				rsp[w] ! REFRESH, g
			fi
		}
	od
}

/* a control plane may stall between reading the store and committing
   (a GC pause, a slow disk, SIGSTOP): its lease may be taken meanwhile */
inline maybe_stall()
{
	if
	:: atomic { stalls_left > 0 -> stalls_left--; stalled[me] = true };
	   stalled[me] = false
	:: skip
	fi
}

#define FENCE (lease_owner == me && lease_epoch == epoch)

proctype control(byte me)
{
	byte epoch, w;
end:	do
	/* take the lease when it is free or its holder stalled (expiry) */
	:: atomic {
		(lease_owner == NONE || (lease_owner != me && stalled[lease_owner])) &&
		(op_step != 0 || (moves_left > 0 && !hold && running)) && !stalled[me] ->
		lease_epoch++; lease_owner = me; epoch = lease_epoch
	   }
	   do
	   /* each step reads the store, decides, and commits in a
	      transaction that checks the lease (compare-and-swap on the
	      owner and its epoch): the fence. Between the read and the
	      commit anything may happen. */
	   :: lease_owner == me && !stalled[me] && op_step == 0 &&
	      moves_left > 0 && running && !hold ->
		maybe_stall();
		/* a move starts: state moving, retire the execution */
		if
		:: atomic { FENCE && !hold ->
			running = false; moves_left--; op_step = 1;
			desired[cur_gen] = 2 }
		:: atomic { !(FENCE && !hold) -> skip }   /* rolled back */
		fi
	   :: lease_owner == me && !stalled[me] && op_step == 1 &&
	      rep_retired[cur_gen] ->
		if :: w = 0 :: w = 1 fi;    /* the scheduler's choice */
		maybe_stall();
		/* the next generation in one transaction */
		if
		:: atomic { FENCE ->
			cur_gen++; cur_worker = w; exec_worker[cur_gen] = w;
			desired[cur_gen] = 1; op_step = 2 }
		:: atomic { !FENCE -> skip }
		fi
	   :: lease_owner == me && !stalled[me] && op_step == 2 &&
	      rep_serving[cur_gen] ->
		maybe_stall();
		if
		:: atomic { FENCE -> running = true; op_step = 0; lease_owner = NONE }
		:: atomic { !FENCE -> skip }
		fi
	   :: lease_owner != me -> break
	   od
	od
}

/* route lookup: the route request waits for a serving execution
   (api_routes.c); a route handed to a repair is held */
inline get_route(repair)
{
	atomic {
		running && rep_serving[cur_gen] ->
		cgen = cur_gen; cworker = cur_worker;
		if :: repair -> hold = true :: else -> skip fi
	}
}

active proctype client()
{
	byte cgen = 0, cworker = 0, g, n = 0;
	mtype out;
	get_route(false);
	do
	:: n < NREQ ->
		req[cworker] ! cgen;
		rsp[cworker] ? out, g;
		if
		:: out == ALLOW -> served_reqs++
		:: out == REFRESH ->
			get_route(true);                /* repair, compare-and-swap */
			req[cworker] ! cgen;            /* one rebuilt attempt */
			rsp[cworker] ? out, g;
			atomic {
				if
				:: out == ALLOW -> served_reqs++
				:: out == REFRESH ->
					/* property 3: a second refusal only while
					   the sandbox is not running */
					if :: running -> second_refusal_while_running = true
					   :: else -> skip fi
				fi;
				hold = false                /* the hold ends */
			}
		fi;
		n++
	:: n == NREQ -> break
	od;
	client_done = true
}

init
{
	atomic {
		/* the create: generation 1 on worker 0, waiting to serve */
		exec_worker[1] = 0; desired[1] = 1;
		run worker(0); run worker(1);
		run control(0); run control(1)
	}
}

/* property 4: progress when the network and the processes are fair:
   every request is answered and every move completes */
ltl progress { <> (client_done && moves_left == 0 && running && op_step == 0) }
