"""The Textual app of epdoctor (`epdoctor tui`): presentation only.

Every verdict, fact, plan and gate shown here is computed by the headless
core (epdoctor.diagnose, epdoctor.plan, epdoctor.launch, epdoctor.knowledge);
these modules only draw it and run that core in worker threads.
"""
