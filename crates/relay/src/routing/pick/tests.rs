use super::*;

const PRIMARY: Brief = Brief {
    checked: true,
    up: true,
    read_only: false,
    replicating: false,
    lag: None,
    galera: None,
    galera_queue: 0,
    reads_unlike_primary: false,
    filtered: false,
};
const REPLICA: Brief = Brief {
    checked: true,
    up: true,
    read_only: true,
    replicating: true,
    lag: Some(0),
    galera: None,
    galera_queue: 0,
    reads_unlike_primary: false,
    filtered: false,
};
const UNCHECKED: Brief = Brief {
    checked: false,
    up: false,
    read_only: false,
    replicating: false,
    lag: None,
    galera: None,
    galera_queue: 0,
    reads_unlike_primary: false,
    filtered: false,
};
const NODE: Brief = Brief {
    checked: true,
    up: true,
    read_only: false,
    replicating: false,
    lag: None,
    galera: Some(true),
    galera_queue: 0,
    reads_unlike_primary: false,
    filtered: false,
};

fn down(b: Brief) -> Brief {
    Brief { up: false, ..b }
}
fn lagging(secs: u64) -> Brief {
    Brief {
        lag: Some(secs),
        ..REPLICA
    }
}

/// (what, route, states, groups, policy, candidates)
type RouteRow = (
    &'static str,
    Route,
    Vec<Brief>,
    Vec<Option<usize>>,
    Policy,
    Vec<usize>,
);
/// (what, route, states, writer, policy, candidates)
type GaleraRow = (
    &'static str,
    Route,
    Vec<Brief>,
    Option<usize>,
    Policy,
    Vec<usize>,
);
/// (candidates, busy, weights, turn, chosen)
type BusyRow = (Vec<usize>, Vec<usize>, Vec<u32>, u64, Option<usize>);

fn policy() -> Policy {
    Policy {
        max_lag: 10,
        multi_primary: false,
        galera_writers: Writers::One,
        galera_max_recv_queue: 100,
    }
}

/// Every rule of the non-Galera routes, one row each.
#[test]
fn which_backends_a_route_may_use() {
    let stopped_replica = Brief {
        replicating: false,
        ..REPLICA
    };
    let rows: Vec<RouteRow> = vec![
        (
            "any: all live",
            Route::Any,
            vec![PRIMARY, REPLICA],
            vec![None, None],
            policy(),
            vec![0, 1],
        ),
        (
            "any: not a down one",
            Route::Any,
            vec![down(PRIMARY), REPLICA],
            vec![None, None],
            policy(),
            vec![1],
        ),
        (
            "any: unchecked counts as live",
            Route::Any,
            vec![UNCHECKED, down(REPLICA)],
            vec![None, None],
            policy(),
            vec![0],
        ),
        (
            "any: all down, any",
            Route::Any,
            vec![down(PRIMARY), down(REPLICA)],
            vec![None, None],
            policy(),
            vec![0, 1],
        ),
        (
            "primary: the writable one",
            Route::Primary,
            vec![REPLICA, PRIMARY, REPLICA],
            vec![None; 3],
            policy(),
            vec![1],
        ),
        (
            "primary: no guess before a check",
            Route::Primary,
            vec![UNCHECKED, UNCHECKED],
            vec![None; 2],
            policy(),
            vec![],
        ),
        (
            "primary: a replica is never the primary",
            Route::Primary,
            vec![down(PRIMARY), REPLICA],
            vec![None; 2],
            policy(),
            vec![],
        ),
        (
            "primary: two writable refused",
            Route::Primary,
            vec![PRIMARY, PRIMARY, REPLICA],
            vec![None; 3],
            policy(),
            vec![],
        ),
        (
            "primary: two writable shared when configured",
            Route::Primary,
            vec![PRIMARY, PRIMARY, REPLICA],
            vec![None; 3],
            Policy {
                multi_primary: true,
                ..policy()
            },
            vec![0, 1],
        ),
        (
            "replica: replicating, in lag",
            Route::Replica,
            vec![PRIMARY, REPLICA, REPLICA],
            vec![None; 3],
            policy(),
            vec![1, 2],
        ),
        (
            "replica: lag at the limit is in",
            Route::Replica,
            vec![PRIMARY, lagging(10), lagging(11)],
            vec![None; 3],
            policy(),
            vec![1],
        ),
        (
            "replica: unknown lag is out",
            Route::Replica,
            vec![
                PRIMARY,
                Brief {
                    lag: None,
                    ..REPLICA
                },
            ],
            vec![None; 2],
            policy(),
            vec![0],
        ),
        (
            "replica: stopped replication is out",
            Route::Replica,
            vec![PRIMARY, stopped_replica],
            vec![None; 2],
            policy(),
            vec![0],
        ),
        (
            "replica: one whose sessions read otherwise than the primary's is out",
            Route::Replica,
            vec![
                PRIMARY,
                Brief {
                    reads_unlike_primary: true,
                    ..REPLICA
                },
                REPLICA,
            ],
            vec![None, None, None],
            policy(),
            vec![2],
        ),
        (
            "replica: the only one reading otherwise: the primary",
            Route::Replica,
            vec![
                PRIMARY,
                Brief {
                    reads_unlike_primary: true,
                    ..REPLICA
                },
            ],
            vec![None, None],
            policy(),
            vec![0],
        ),
        (
            "replica: one with replication filters is out",
            Route::Replica,
            vec![
                PRIMARY,
                Brief {
                    filtered: true,
                    ..REPLICA
                },
                REPLICA,
            ],
            vec![None, None, None],
            policy(),
            vec![2],
        ),
        (
            "group: one with replication filters serves its group's reads",
            Route::Group(0),
            vec![
                PRIMARY,
                Brief {
                    filtered: true,
                    ..REPLICA
                },
                REPLICA,
            ],
            vec![None, Some(0), None],
            policy(),
            vec![1],
        ),
        (
            "replica: a down one is out",
            Route::Replica,
            vec![PRIMARY, down(REPLICA), REPLICA],
            vec![None; 3],
            policy(),
            vec![2],
        ),
        (
            "replica: none, so the primary",
            Route::Replica,
            vec![PRIMARY, lagging(60)],
            vec![None; 2],
            policy(),
            vec![0],
        ),
        (
            "replica: none and two primaries: nothing",
            Route::Replica,
            vec![PRIMARY, PRIMARY],
            vec![None; 2],
            policy(),
            vec![],
        ),
        (
            "replica: grouped replicas serve only their group",
            Route::Replica,
            vec![PRIMARY, REPLICA, REPLICA],
            vec![None, Some(0), None],
            policy(),
            vec![2],
        ),
        (
            "group: its own replicas",
            Route::Group(0),
            vec![PRIMARY, REPLICA, REPLICA],
            vec![None, Some(0), None],
            policy(),
            vec![1],
        ),
        (
            "group: another group's are not",
            Route::Group(1),
            vec![PRIMARY, REPLICA, REPLICA],
            vec![None, Some(0), Some(1)],
            policy(),
            vec![2],
        ),
        (
            "group: none left, the primary",
            Route::Group(0),
            vec![PRIMARY, down(REPLICA)],
            vec![None, Some(0)],
            policy(),
            vec![0],
        ),
    ];
    for (what, route, states, groups, pol, want) in rows {
        assert_eq!(
            candidates(route, &states, &groups, &pol, None),
            want,
            "{what}"
        );
    }
}

/// A Galera cluster: usable nodes only; one writer, reads elsewhere.
#[test]
fn galera_routes() {
    let excluded = Brief {
        galera: Some(false),
        ..NODE
    };
    let queued = Brief {
        galera_queue: 500,
        ..NODE
    };
    let rows: Vec<GaleraRow> = vec![
        (
            "writes: the writer",
            Route::Primary,
            vec![NODE, NODE, NODE],
            Some(1),
            policy(),
            vec![1],
        ),
        (
            "reads: the others",
            Route::Replica,
            vec![NODE, NODE, NODE],
            Some(0),
            policy(),
            vec![1, 2],
        ),
        (
            "reads: not an excluded node",
            Route::Replica,
            vec![NODE, excluded, NODE],
            Some(0),
            policy(),
            vec![2],
        ),
        (
            "reads: not a node whose sessions read otherwise than the writer's",
            Route::Replica,
            vec![
                NODE,
                Brief {
                    reads_unlike_primary: true,
                    ..NODE
                },
                NODE,
            ],
            Some(0),
            policy(),
            vec![2],
        ),
        (
            "writes: such a node still writes with every node a writer",
            Route::Primary,
            vec![
                NODE,
                Brief {
                    reads_unlike_primary: true,
                    ..NODE
                },
            ],
            Some(0),
            Policy {
                galera_writers: Writers::All,
                ..policy()
            },
            vec![0, 1],
        ),
        (
            "reads: not a down node",
            Route::Replica,
            vec![NODE, down(NODE), NODE],
            Some(0),
            policy(),
            vec![2],
        ),
        (
            "reads: not one far behind",
            Route::Replica,
            vec![NODE, queued, NODE],
            Some(0),
            policy(),
            vec![2],
        ),
        (
            "reads: only the writer left",
            Route::Replica,
            vec![NODE, excluded, down(NODE)],
            Some(0),
            policy(),
            vec![0],
        ),
        (
            "writes: every usable node with galera_writers = all",
            Route::Primary,
            vec![NODE, excluded, NODE],
            Some(0),
            Policy {
                galera_writers: Writers::All,
                ..policy()
            },
            vec![0, 2],
        ),
        (
            "writable Galera nodes are no several primaries",
            Route::Primary,
            vec![NODE, NODE],
            Some(0),
            policy(),
            vec![0],
        ),
        (
            "no writer: nothing",
            Route::Primary,
            vec![excluded, excluded],
            None,
            policy(),
            vec![],
        ),
    ];
    for (what, route, states, writer, pol, want) in rows {
        let groups = vec![None; states.len()];
        assert_eq!(
            candidates(route, &states, &groups, &pol, writer),
            want,
            "{what}"
        );
    }
}

#[test]
fn several_primaries_are_named_only_when_refused() {
    assert_eq!(
        several_primaries(&[PRIMARY, REPLICA, PRIMARY], &policy()),
        Some(vec![0, 2])
    );
    assert_eq!(several_primaries(&[PRIMARY, REPLICA], &policy()), None);
    let shared = Policy {
        multi_primary: true,
        ..policy()
    };
    assert_eq!(several_primaries(&[PRIMARY, PRIMARY], &shared), None);
    assert_eq!(several_primaries(&[NODE, NODE], &policy()), None, "Galera");
    assert_eq!(
        several_primaries(&[PRIMARY, down(PRIMARY)], &policy()),
        None
    );
}

#[test]
fn the_least_busy_per_weight_and_ties_take_turns() {
    // (candidates, busy, weights, turn, chosen)
    let rows: Vec<BusyRow> = vec![
        (vec![], vec![], vec![], 0, None),
        (vec![0, 1], vec![3, 1], vec![1, 1], 0, Some(1)),
        (vec![0, 1], vec![0, 0], vec![1, 1], 0, Some(0)),
        (vec![0, 1], vec![0, 0], vec![1, 1], 1, Some(1)),
        // Weight 3 vs 1: 3 busy on the heavy one is as busy as 1 on the light.
        (vec![0, 1], vec![3, 1], vec![3, 1], 0, Some(0)),
        (vec![0, 1], vec![4, 1], vec![3, 1], 0, Some(1)),
        // Ties: turns 0..3 go to the weight-3 backend, turn 3 to the other.
        (vec![0, 1], vec![0, 0], vec![3, 1], 2, Some(0)),
        (vec![0, 1], vec![0, 0], vec![3, 1], 3, Some(1)),
        // A weight of 0 counts as 1.
        (vec![2], vec![0, 0, 5], vec![1, 1, 0], 9, Some(2)),
    ];
    for (cands, busy, weight, turn, want) in rows {
        assert_eq!(
            least_busy(&cands, |i| busy.get(i).copied().unwrap_or(0), &weight, turn),
            want,
            "{cands:?} busy {busy:?} weight {weight:?} turn {turn}"
        );
    }
}
